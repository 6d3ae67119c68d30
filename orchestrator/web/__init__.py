"""The live web page of a run or a campaign, and of a finished run from its directory: what the
controller already computed, served as JSON to a static page (uPlot charts, vendored)."""
