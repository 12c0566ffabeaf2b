"""Executors: who runs each symbol. See :mod:`.base` for the interface."""
from .base import Executor, available_executors, get_executor, register_executor  # noqa: F401
