"""Request and response schemas of the API (kept apart: ``*Request`` / ``*Response``)."""
