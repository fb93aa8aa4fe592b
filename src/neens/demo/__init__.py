"""The worked example: simulated model endpoints to run Neens against without a network."""
