"""One-way delay (DESIGN §9): the wire format both ends share, the agent side and its figures."""
