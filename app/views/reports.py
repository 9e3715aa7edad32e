"""Page under construction."""

import streamlit as st

st.title("reports")
st.write("This page is being built.")
