"""Network names of the Paillier protocols (:mod:`ppml.algorithms._hetero_lr`) that a launcher needs too.

Apart from the protocol so that a process naming the coordinator (:mod:`ppml.launch.party`, for its
checkpoints) does not import the protocol and its cipher: the stages whose parties never run it (FDML) keep
the crypto code out of their code fingerprint.
"""

#: Network name of the coordinator (the data parties keep their own names, normally ``guest`` and ``host``).
ARBITER = "arbiter"
