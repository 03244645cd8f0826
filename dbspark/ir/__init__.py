"""The logical IR shared by every front end: schemas and scalar expressions."""
