"""Page under construction."""

import streamlit as st

st.title("whatif")
st.write("This page is being built.")
