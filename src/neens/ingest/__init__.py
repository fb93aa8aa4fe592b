"""Traces in: the OTLP/HTTP receiver's decoder, the native session JSON, and linking."""
