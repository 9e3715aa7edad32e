"""Page under construction."""

import streamlit as st

st.title("benchmarks")
st.write("This page is being built.")
