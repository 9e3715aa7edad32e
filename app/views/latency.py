"""Page under construction."""

import streamlit as st

st.title("latency")
st.write("This page is being built.")
