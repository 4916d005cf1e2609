"""Data preparation for REALM: masking, ICT examples, collators and answer spans."""
