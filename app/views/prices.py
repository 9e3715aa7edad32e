"""Page under construction."""

import streamlit as st

st.title("prices")
st.write("This page is being built.")
