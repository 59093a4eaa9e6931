"""What starts parties: the launchers, above the algorithms they run.

- :mod:`~ppml.launch.party`: one party of ``transport: grpc`` in its own process (``python -m ppml.party``):
  its shard, its peers file, its links, its outputs.
- :mod:`~ppml.launch.local`: every party of a ``transport: grpc`` run as its own ``python -m ppml.party``
  process on this machine (the train stage's launcher for that transport).
- :mod:`~ppml.launch.ray_runner`: ``transport: ray``, one Ray actor (process) per party, linked directly.
- :mod:`~ppml.launch.prepare`: one organization's side of the prepare stage over its links
  (``python -m ppml.party --prepare``).

Imports go one way: ``ppml.launch`` -> ``ppml.experiment``, ``ppml.algorithms``, ``ppml.data``,
``ppml.runtime`` -> ``ppml.network``. Nothing below imports this package (``ppml.experiment`` loads a
launcher by its name, :data:`ppml.experiment.LAUNCHERS`, only to run a block on that launcher's transport).
The carriers of the links (:mod:`ppml.network.tls_links`, :mod:`ppml.network.grpc_links`) register
themselves with :mod:`ppml.network.links` when imported; a launcher that opens links imports them.
Importing this package loads none of its modules.
"""
