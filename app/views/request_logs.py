"""Page under construction."""

import streamlit as st

st.title("request_logs")
st.write("This page is being built.")
