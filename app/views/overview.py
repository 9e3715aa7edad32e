"""Page under construction."""

import streamlit as st

st.title("overview")
st.write("This page is being built.")
