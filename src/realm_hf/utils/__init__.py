"""Helpers every room of the library uses: lazy package exports (`lazy`) and quieting third-party output (`quiet`)."""
