"""The configuration: YuniKorn's ``queues.yaml``, read strictly, and the core's timeouts.

What it holds: the YAML reader that keeps line and column for every message
(``_reader``), quantities with YuniKorn's units (``_quantity``), the model of a
configuration (``_model``: partitions, queues, placement rules, limits, as frozen structs),
the parser that checks a document and builds the model (``_parser``), user and group limits
(``_limits``), queue property values read one way for the core and the check
(``_properties``), Go durations (``_duration``), YAML syntax errors in plain words
(``_syntax``), ``scheduler check-config`` (``_check``),
and the core's timeouts with YuniKorn's defaults (``_timeouts``).

It may import ``scheduler.si`` and ``scheduler._errors``; nothing here knows a queue
object, an actor or the core: the objects are built from the model one room up.
"""
