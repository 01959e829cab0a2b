"""The what-if app's own modules: Altair charts (`ui.charts`) and scenarios, links and uploads
(`ui.scenario`).  They sit beside `app.py` so that `planner/` stays free of Altair and Streamlit
conventions; they only call `planner`'s public functions."""
