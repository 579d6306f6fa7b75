"""Adapters: how the conformance suite drives an implementation (`--impl module:Adapter`). See base.py."""
from conformance.adapters.base import Adapter, load_adapter

__all__ = ["Adapter", "load_adapter"]
