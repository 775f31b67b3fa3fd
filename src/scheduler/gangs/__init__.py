"""Gang scheduling, both models.

What it holds: placeholder gangs (``_placeholders``, seed 000: YuniKorn's design): the
application's gang flows, the release handshake that lets a real ask take a placeholder's
place, the placeholder timeout and the clean-up, run as handlers of the application's
actor; and permit gangs (``_permit``, seed 001: Koordinator's): members placed
tentatively, a GangGroup sent to the RM together once every gang has its minimum,
``Strict`` rollback, the waiting time, and the deadlock breaker (``_deadlock``).

It may import ``scheduler.policies``, ``scheduler.objects``, ``scheduler.config``,
``scheduler.si``, ``scheduler._errors`` and the actor runtime (``actors``: promises and
timer handles). The actor these flows run in, its messages and timers belong to
``scheduler.core``, which this room never imports: the flows name what they need of their
actor (``GangFlows``' declared methods) and the core provides it.
"""
