"""Run directories to DataFrames, plots and HTML reports (see DESIGN.md, run directory)."""
