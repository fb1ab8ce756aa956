"""Pure analysis over stored results: what the numbers say, without reading the database or printing."""
