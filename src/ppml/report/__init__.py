"""Reports: published numbers, claims, tables and figures.

``PAPER_REPORTS`` lists the modules that build each paper's tables, figures and claims (see
:mod:`ppml.report.base`). They are imported by the report stage in this order.
"""

PAPER_REPORTS: list[str] = [
    "ppml.report.baselines",
    "ppml.report.admm_sharing",
    "ppml.report.fdml",
    "ppml.report.pp_admm",
    "ppml.report.paillier_sqn",
]
