"""The domain objects: plain synchronous classes that a partition's actors own.

What it holds:

* resources and their arithmetic (``_resources``);
* asks and allocations (``_asks``); nodes, the node index and reservations (``_nodes``);
* the gang an ask declares in its tags (``_gang_tags``);
* applications with their pending asks and state machine (``_application``), and the
  placeholder replacements they wait for (``_handshake``);
* the queue tree with its quotas, usage and the order children and applications are tried
  in (``_queue``), with priorities (``_priority``);
* what each user and group runs against its limits (``_ugm``), and the nodes held for
  asks (``_reservations``);
* the SI responses collected in a turn (``_outbox``), and the state a partition's actors
  share (``_partition``: ``PartitionState``).

No anyio and no actors: everything here is testable without an event loop. It may import
``scheduler.config``, ``scheduler.si`` and ``scheduler._errors``, and name the actor
runtime's types (``actors``) for type checking only. Modules of this room know each other's
types (an application and its queue); no room above is imported.
"""
