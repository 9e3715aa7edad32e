"""The Streamlit dashboard: a thin shell over the ``planner`` library and store (``planner
dashboard`` starts it). ``main.py`` is the entry script; ``views/`` holds one file per page;
``common.py`` what the pages share."""
