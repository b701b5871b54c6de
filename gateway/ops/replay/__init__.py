"""``nightowl replay``: a recorded chat through the real turn runner, with a chart."""
