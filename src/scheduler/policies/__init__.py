"""Policies: decisions made over the domain objects, which change none of them on their own.

What it holds: placing a new application in a leaf queue (``_placement``: YuniKorn's
placement rules, in order, with the submit ACLs and the dynamic queues a rule may create,
and the gang checks an application gets at submission).

It may import ``scheduler.objects``, ``scheduler.config``, ``scheduler.si`` and
``scheduler._errors``. Nothing here knows an actor or the core; the partition's actor
calls it and gives the queues it creates their actors.
"""
