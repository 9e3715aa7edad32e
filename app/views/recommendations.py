"""Page under construction."""

import streamlit as st

st.title("recommendations")
st.write("This page is being built.")
