"""Page under construction."""

import streamlit as st

st.title("forecast")
st.write("This page is being built.")
