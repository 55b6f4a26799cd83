"""Clean stage: assets (assets.py) and checks (checks.py) of the DuckDB SQL chain."""
