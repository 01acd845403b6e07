"""`jax.monitoring`: events, durations and scalars a program (or a library such as orbax)
records, passed to the listeners registered for them. meshsim records no events of its own."""
from __future__ import annotations

from typing import Any, Callable

_event_listeners: list[Callable[..., Any]] = []
_duration_listeners: list[Callable[..., Any]] = []
_time_span_listeners: list[Callable[..., Any]] = []
_scalar_listeners: list[Callable[..., Any]] = []


def record_event(event: str, **kwargs) -> None:
    for callback in _event_listeners:
        callback(event, **kwargs)


def record_event_duration_secs(event: str, duration: float, **kwargs) -> None:
    for callback in _duration_listeners:
        callback(event, duration, **kwargs)


def record_event_time_span(event: str, start_time: float, end_time: float, **kwargs) -> None:
    for callback in _time_span_listeners:
        callback(event, start_time, end_time, **kwargs)


def record_scalar(event: str, value: float | int, **kwargs) -> None:
    for callback in _scalar_listeners:
        callback(event, value, **kwargs)


def register_event_listener(callback) -> None:
    _event_listeners.append(callback)


def register_event_duration_secs_listener(callback) -> None:
    _duration_listeners.append(callback)


def register_event_time_span_listener(callback) -> None:
    _time_span_listeners.append(callback)


def register_scalar_listener(callback) -> None:
    _scalar_listeners.append(callback)


def _unregister(listeners: list, callback) -> None:
    assert callback in listeners  # JAX's own check: a bare AssertionError
    listeners.remove(callback)


def unregister_event_listener(callback) -> None:
    _unregister(_event_listeners, callback)


def unregister_event_duration_listener(callback) -> None:
    _unregister(_duration_listeners, callback)


def unregister_event_time_span_listener(callback) -> None:
    _unregister(_time_span_listeners, callback)


def unregister_scalar_listener(callback) -> None:
    _unregister(_scalar_listeners, callback)


def clear_event_listeners() -> None:
    for listeners in (_event_listeners, _duration_listeners, _time_span_listeners, _scalar_listeners):
        listeners.clear()
