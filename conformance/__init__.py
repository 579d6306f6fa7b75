"""The conformance suite: spec-driven checks of any backend or implementation against the spec and torch."""
