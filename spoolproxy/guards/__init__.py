"""Guards for live runs: budgets with warnings at 80%, and a circuit breaker that stops a
runaway agent by refusing its next model request.

* :mod:`.budget`: :class:`~.budget.Limits`, :class:`~.budget.BudgetMeter` (pure counting),
  :func:`~.budget.meter_transcript` (the same meter over a stored run);
* :mod:`.breaker`: :class:`~.breaker.Guard`, the decisions (pure, no mitmproxy);
* :mod:`.refusal`: the provider-shaped error a refused model request gets;
* :mod:`.addon`: :class:`~.addon.GuardAddon`, the mitmproxy addon carrying them out;
* :mod:`.config`: flags, ``[record]`` and ``[detect]`` resolved into
  :class:`~.config.GuardSettings`.

A fork/verify trial guards itself the same way: build a ``Guard(limits, breaker=True)``,
put ``GuardAddon(guard)`` before the recording addon in the proxy's addons and register
``addon.observe`` as one of the recorder's ``observers``; afterwards ``guard.stop`` says
whether (and why) the trial was stopped and ``guard.meta()`` what to store in
``meta.extra``.
"""

from .breaker import BREAKER_KINDS, Guard, Stop
from .budget import BudgetEvent, BudgetMeter, Limits, meter_transcript

__all__ = ["BREAKER_KINDS", "Guard", "Stop", "BudgetEvent", "BudgetMeter", "Limits", "meter_transcript"]
