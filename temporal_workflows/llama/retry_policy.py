"""Step retry policies, with the names and behaviour of LlamaIndex's ``workflows.retry_policy``.

A policy answers one question after a step raised: wait how many seconds and
try again, or give up (``None``). Build one with
``retry_policy(retry=..., wait=..., stop=...)`` from the conditions, wait
strategies and stop conditions below (``|``/``&`` combine conditions, ``+``
adds waits), or write any object with a ``next(elapsed_time, attempts, error)``
method.

On this engine the same policy decides on both hosts, inside the step: a
failed attempt's messages and outputs are discarded, the step sleeps the
delay and runs again (on Temporal inside the step's activity, which keeps
heartbeating; a worker lost meanwhile is retried by Temporal itself).
"""

from __future__ import annotations

import inspect
import random
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = [
    "ConstantDelayRetryPolicy",
    "ExponentialBackoffRetryPolicy",
    "RetryCondition",
    "RetryInfo",
    "RetryPolicy",
    "StopCondition",
    "WaitStrategy",
    "retry_all",
    "retry_always",
    "retry_any",
    "retry_if_exception",
    "retry_if_exception_cause_type",
    "retry_if_exception_message",
    "retry_if_exception_type",
    "retry_if_not_exception_message",
    "retry_if_not_exception_type",
    "retry_never",
    "retry_policy",
    "retry_unless_exception_type",
    "stop_after_attempt",
    "stop_after_delay",
    "stop_all",
    "stop_any",
    "stop_before_delay",
    "stop_never",
    "wait_chain",
    "wait_combine",
    "wait_exponential",
    "wait_exponential_jitter",
    "wait_fixed",
    "wait_full_jitter",
    "wait_incrementing",
    "wait_none",
    "wait_random",
    "wait_random_exponential",
]

Seconds = int | float | timedelta


def _seconds(value: Seconds) -> float:
    return float(value.total_seconds() if isinstance(value, timedelta) else value)


@dataclass(frozen=True)
class RetryInfo:
    """Where the running step is in its retries (``ctx.retry_info()``).

    Attributes:
        retry_number: 0 on the first attempt, 1 on the first retry, ...
        elapsed_seconds: Seconds since the first attempt began (0.0 on the first).
        last_exception: The previous attempt's exception, or ``None``.
        last_failed_at: When the previous attempt failed (UTC), or ``None``.
    """

    retry_number: int
    elapsed_seconds: float
    last_exception: Exception | None
    last_failed_at: datetime | None


@runtime_checkable
class RetryPolicy(Protocol):
    """Anything with ``next``: seconds to wait before the next attempt, or ``None`` to give up."""

    def next(self, elapsed_time: float, attempts: int, error: Exception, *, seed: int | None = None) -> float | None:
        """Decide after the ``attempts``-th failure (counted from 1), ``elapsed_time`` seconds after the first try."""


class RetryCondition(Protocol):
    def __call__(self, error: BaseException) -> bool: ...


class WaitStrategy(Protocol):
    """Delay before retry number ``attempts`` (counted from 0)."""

    def __call__(self, attempts: int, *, seed: int | None = None) -> float: ...


class StopCondition(Protocol):
    def __call__(self, attempts: int, elapsed_time: float, *, upcoming_sleep: float = 0.0) -> bool: ...


class _Condition:
    """A retry condition that composes with ``&`` and ``|``."""

    def __call__(self, error: BaseException) -> bool:
        raise NotImplementedError

    def __and__(self, other: RetryCondition) -> retry_all:
        return retry_all(self, other)

    def __rand__(self, other: RetryCondition) -> retry_all:
        return retry_all(other, self)

    def __or__(self, other: RetryCondition) -> retry_any:
        return retry_any(self, other)

    def __ror__(self, other: RetryCondition) -> retry_any:
        return retry_any(other, self)


class _Wait:
    """A wait strategy that adds up with ``+`` and ``sum()``."""

    def __call__(self, attempts: int, *, seed: int | None = None) -> float:
        raise NotImplementedError

    def __add__(self, other: WaitStrategy) -> wait_combine:
        return wait_combine(self, other)

    def __radd__(self, other: object) -> object:
        if other == 0:  # sum() starts from 0
            return self
        if callable(other):
            return wait_combine(other, self)  # type: ignore[arg-type]
        return NotImplemented


class _Stop:
    """A stop condition that composes with ``&`` and ``|``."""

    def __call__(self, attempts: int, elapsed_time: float, *, upcoming_sleep: float = 0.0) -> bool:
        raise NotImplementedError

    def __and__(self, other: StopCondition) -> stop_all:
        return stop_all(self, other)

    def __rand__(self, other: StopCondition) -> stop_all:
        return stop_all(other, self)

    def __or__(self, other: StopCondition) -> stop_any:
        return stop_any(self, other)

    def __ror__(self, other: StopCondition) -> stop_any:
        return stop_any(other, self)


def _uniform(seed: int | None, low: float, high: float) -> float:
    """A uniform draw; repeatable when a ``seed`` is given."""
    return random.Random(seed).uniform(low, high) if seed is not None else random.uniform(low, high)


# -- retry conditions ------------------------------------------------------------------------------------------


class retry_if_exception(_Condition):
    """Retry when ``predicate(error)`` is true."""

    def __init__(self, predicate: Callable[[BaseException], bool]) -> None:
        self.predicate = predicate

    def __call__(self, error: BaseException) -> bool:
        return bool(self.predicate(error))


class retry_if_exception_type(retry_if_exception):
    """Retry when the error is an instance of ``exception_types``."""

    def __init__(self, exception_types: type[BaseException] | tuple[type[BaseException], ...] = Exception) -> None:
        self.exception_types = exception_types
        super().__init__(lambda error: isinstance(error, exception_types))


class retry_if_not_exception_type(retry_if_exception):
    """Retry unless the error is an instance of ``exception_types``."""

    def __init__(self, exception_types: type[BaseException] | tuple[type[BaseException], ...] = Exception) -> None:
        self.exception_types = exception_types
        super().__init__(lambda error: not isinstance(error, exception_types))


class retry_unless_exception_type(retry_if_not_exception_type):
    """Same as :class:`retry_if_not_exception_type` (tenacity's name)."""


class retry_if_exception_message(_Condition):
    """Retry when the error's message equals ``message`` or matches the regular expression ``match``."""

    def __init__(self, message: str | None = None, match: str | re.Pattern[str] | None = None) -> None:
        if message is None and match is None:
            raise TypeError("retry_if_exception_message() missing 1 required argument 'message' or 'match'")
        if message is not None and match is not None:
            raise TypeError("retry_if_exception_message() takes either 'message' or 'match', not both")
        self.message = message
        self.match = match
        self._pattern = re.compile(match) if isinstance(match, str) else match

    def __call__(self, error: BaseException) -> bool:
        text = str(error)
        if self.message is not None:
            return text == self.message
        return self._pattern is not None and self._pattern.search(text) is not None


class retry_if_not_exception_message(retry_if_exception_message):
    """Retry when the error's message does not equal ``message`` nor match ``match``."""

    def __call__(self, error: BaseException) -> bool:
        return not super().__call__(error)


class retry_if_exception_cause_type(_Condition):
    """Retry when an exception in the explicit ``__cause__`` chain (``raise X from Y``) is of the given types."""

    def __init__(self, exception_types: type[BaseException] | tuple[type[BaseException], ...] = Exception) -> None:
        self.exception_types = exception_types

    def __call__(self, error: BaseException) -> bool:
        cause = error.__cause__
        while cause is not None:
            if isinstance(cause, self.exception_types):
                return True
            cause = cause.__cause__
        return False


class retry_any(_Condition):
    """Retry when any of the conditions says so (same as ``a | b``)."""

    def __init__(self, *retries: RetryCondition) -> None:
        self.retries = retries

    def __call__(self, error: BaseException) -> bool:
        return any(r(error) for r in self.retries)


class retry_all(_Condition):
    """Retry when all of the conditions say so (same as ``a & b``)."""

    def __init__(self, *retries: RetryCondition) -> None:
        self.retries = retries

    def __call__(self, error: BaseException) -> bool:
        return all(r(error) for r in self.retries)


class retry_always(_Condition):
    """Always retry."""

    def __call__(self, error: BaseException) -> bool:
        return True


class retry_never(_Condition):
    """Never retry."""

    def __call__(self, error: BaseException) -> bool:
        return False


# -- wait strategies -------------------------------------------------------------------------------------------


class wait_fixed(_Wait):
    """The same delay before every retry."""

    def __init__(self, wait: Seconds) -> None:
        self.wait = _seconds(wait)

    def __call__(self, attempts: int, *, seed: int | None = None) -> float:
        return self.wait


class wait_none(wait_fixed):
    """No delay."""

    def __init__(self) -> None:
        super().__init__(0)


class wait_exponential(_Wait):
    """``multiplier * exp_base ** n`` before retry ``n`` (from 0), kept between ``min`` and ``max``."""

    def __init__(
        self, multiplier: int | float = 1.0, exp_base: int | float = 2.0, max: Seconds = 60.0, min: Seconds = 0.0
    ) -> None:
        self.multiplier = float(multiplier)
        self.exp_base = float(exp_base)
        self.max = _seconds(max)
        self.min = _seconds(min)

    def __call__(self, attempts: int, *, seed: int | None = None) -> float:
        return max(0.0, self.min, min(self.multiplier * self.exp_base**attempts, self.max))


class wait_incrementing(_Wait):
    """``start + increment * n`` before retry ``n``, at most ``max``, never negative."""

    def __init__(self, start: Seconds = 0.0, increment: Seconds = 100.0, max: Seconds = float("inf")) -> None:
        self.start = _seconds(start)
        self.increment = _seconds(increment)
        self.max = _seconds(max)

    def __call__(self, attempts: int, *, seed: int | None = None) -> float:
        return max(0.0, min(self.start + self.increment * attempts, self.max))


class wait_random(_Wait):
    """A delay drawn uniformly from ``[min, max]`` (repeatable with a ``seed``)."""

    def __init__(self, min: Seconds = 0.0, max: Seconds = 1.0) -> None:
        self.min = _seconds(min)
        self.max = _seconds(max)

    def __call__(self, attempts: int, *, seed: int | None = None) -> float:
        return _uniform(seed, self.min, self.max)


class wait_exponential_jitter(_Wait):
    """Exponential backoff from ``initial`` plus a random ``[0, jitter]``, at most ``max``."""

    def __init__(self, initial: float = 1.0, exp_base: float = 2.0, max: float = 60.0, jitter: float = 1.0) -> None:
        self.initial = initial
        self.exp_base = exp_base
        self.max = max
        self.jitter = jitter

    def __call__(self, attempts: int, *, seed: int | None = None) -> float:
        base = min(self.initial * self.exp_base**attempts, self.max)
        return min(base + _uniform(seed, 0, self.jitter), self.max)


class wait_random_exponential(_Wait):
    """A delay drawn uniformly between ``min`` and the exponential bound of this retry (full jitter)."""

    def __init__(
        self, multiplier: int | float = 1.0, exp_base: int | float = 2.0, max: Seconds = 60.0, min: Seconds = 0.0
    ) -> None:
        self.multiplier = float(multiplier)
        self.exp_base = float(exp_base)
        self.max = _seconds(max)
        self.min = _seconds(min)

    def __call__(self, attempts: int, *, seed: int | None = None) -> float:
        upper = max(0.0, self.min, min(self.multiplier * self.exp_base**attempts, self.max))
        return _uniform(seed, self.min, upper)


def wait_full_jitter(
    multiplier: int | float = 1.0, exp_base: int | float = 2.0, max: Seconds = 60.0, min: Seconds = 0.0
) -> wait_random_exponential:
    """Same as :class:`wait_random_exponential`."""
    return wait_random_exponential(multiplier=multiplier, exp_base=exp_base, max=max, min=min)


class wait_chain(_Wait):
    """The n-th strategy before retry n; the last one for every retry after."""

    def __init__(self, *strategies: WaitStrategy) -> None:
        if not strategies:
            raise ValueError("wait_chain requires at least one strategy")
        self.strategies = strategies

    def __call__(self, attempts: int, *, seed: int | None = None) -> float:
        return self.strategies[min(attempts, len(self.strategies) - 1)](attempts, seed=seed)


class wait_combine(_Wait):
    """The sum of the strategies' delays (same as ``a + b``)."""

    def __init__(self, *strategies: WaitStrategy) -> None:
        self.strategies = strategies

    def __call__(self, attempts: int, *, seed: int | None = None) -> float:
        return sum(s(attempts, seed=seed) for s in self.strategies)


# -- stop conditions -------------------------------------------------------------------------------------------


class stop_after_attempt(_Stop):
    """Give up after ``max_attempt_number`` attempts."""

    def __init__(self, max_attempt_number: int) -> None:
        self.max_attempt_number = max_attempt_number

    def __call__(self, attempts: int, elapsed_time: float, *, upcoming_sleep: float = 0.0) -> bool:
        return attempts >= self.max_attempt_number


class stop_after_delay(_Stop):
    """Give up once ``max_delay`` seconds have passed since the first attempt."""

    def __init__(self, max_delay: Seconds) -> None:
        self.max_delay = _seconds(max_delay)

    def __call__(self, attempts: int, elapsed_time: float, *, upcoming_sleep: float = 0.0) -> bool:
        return elapsed_time >= self.max_delay


class stop_before_delay(_Stop):
    """Give up if the next delay would end past ``max_delay`` seconds since the first attempt."""

    def __init__(self, max_delay: Seconds) -> None:
        self.max_delay = _seconds(max_delay)

    def __call__(self, attempts: int, elapsed_time: float, *, upcoming_sleep: float = 0.0) -> bool:
        return elapsed_time + upcoming_sleep >= self.max_delay


class stop_any(_Stop):
    """Give up when any of the conditions says so (same as ``a | b``)."""

    def __init__(self, *stops: StopCondition) -> None:
        self.stops = stops

    def __call__(self, attempts: int, elapsed_time: float, *, upcoming_sleep: float = 0.0) -> bool:
        return any(s(attempts, elapsed_time, upcoming_sleep=upcoming_sleep) for s in self.stops)


class stop_all(_Stop):
    """Give up when all of the conditions say so (same as ``a & b``)."""

    def __init__(self, *stops: StopCondition) -> None:
        self.stops = stops

    def __call__(self, attempts: int, elapsed_time: float, *, upcoming_sleep: float = 0.0) -> bool:
        return all(s(attempts, elapsed_time, upcoming_sleep=upcoming_sleep) for s in self.stops)


class stop_never(_Stop):
    """Never give up (bound it with the workflow's timeout)."""

    def __call__(self, attempts: int, elapsed_time: float, *, upcoming_sleep: float = 0.0) -> bool:
        return False


# -- policies --------------------------------------------------------------------------------------------------


class _ComposedPolicy:
    """A policy made of a retry condition, a wait strategy and a stop condition (see :func:`retry_policy`)."""

    def __init__(
        self,
        retry: RetryCondition | None = None,
        wait: WaitStrategy | None = None,
        stop: StopCondition | None = None,
    ) -> None:
        self.retry = retry
        self.wait: WaitStrategy = wait if wait is not None else wait_fixed(5)
        self.stop: StopCondition = stop if stop is not None else stop_after_attempt(3)

    def next(self, elapsed_time: float, attempts: int, error: Exception, *, seed: int | None = None) -> float | None:
        if self.retry is not None and not self.retry(error):
            return None
        # ``attempts`` counts failures from 1; wait strategies count retries from 0.
        delay = self.wait(max(attempts - 1, 0), seed=seed)
        if self.stop(attempts, elapsed_time, upcoming_sleep=delay):
            return None
        return delay


def retry_policy(
    retry: RetryCondition | None = None,
    wait: WaitStrategy | None = None,
    stop: StopCondition | None = None,
) -> RetryPolicy:
    """A policy from its three parts; with no arguments: any error, 5 s apart, at most 3 attempts."""
    return _ComposedPolicy(retry=retry, wait=wait, stop=stop)


def ConstantDelayRetryPolicy(maximum_attempts: int = 3, delay: float = 5) -> RetryPolicy:
    """Deprecated: ``retry_policy(wait=wait_fixed(delay), stop=stop_after_attempt(maximum_attempts))``."""
    warnings.warn(
        "ConstantDelayRetryPolicy is deprecated, use "
        "retry_policy(wait=wait_fixed(delay), stop=stop_after_attempt(n)) instead",
        DeprecationWarning,
        stacklevel=2,
    )
    return _ComposedPolicy(wait=wait_fixed(delay), stop=stop_after_attempt(maximum_attempts))


def ExponentialBackoffRetryPolicy(
    maximum_attempts: int = 5,
    initial_delay: float = 1.0,
    multiplier: float = 2.0,
    max_delay: float = 60.0,
    jitter: bool = True,
) -> RetryPolicy:
    """Deprecated: ``retry_policy(wait=wait_exponential(...) or wait_random_exponential(...), stop=...)``."""
    warnings.warn(
        "ExponentialBackoffRetryPolicy is deprecated, use "
        "retry_policy(wait=wait_exponential(...), stop=stop_after_attempt(n)) instead",
        DeprecationWarning,
        stacklevel=2,
    )
    wait: WaitStrategy = (
        wait_random_exponential(multiplier=initial_delay, exp_base=multiplier, max=max_delay)
        if jitter
        else wait_exponential(multiplier=initial_delay, exp_base=multiplier, max=max_delay)
    )
    return _ComposedPolicy(wait=wait, stop=stop_after_attempt(maximum_attempts))


def decide_retry(policy: object, elapsed_time: float, attempts: int, error: Exception) -> float | None:
    """Ask ``policy`` (ours or a user's duck-typed one) for the delay before the next attempt, or ``None``.

    A user's ``next(elapsed_time, attempts, error)`` may not take ``seed``
    (LlamaIndex's documented custom policy does not); a delay that is not a
    non-negative number stops the retries instead of failing oddly later.
    """
    next_ = getattr(policy, "next", None)
    if next_ is None:
        return None
    try:
        takes_seed = "seed" in inspect.signature(next_).parameters
    except (TypeError, ValueError):
        takes_seed = False
    delay = next_(elapsed_time, attempts, error, seed=None) if takes_seed else next_(elapsed_time, attempts, error)
    if delay is None:
        return None
    delay = float(delay)
    return delay if delay >= 0 else 0.0
