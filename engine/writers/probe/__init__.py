"""The probe writer: no model, the default. Survivors meet inputs the own check never tried.

The wing, by what each part does: ``calls`` (what a captured call is made of), ``kinds``
(the trigger kinds' table and their variants), ``inputs`` (a variant as code: the
candidates), ``text`` (the test a hit becomes), ``jobs`` (its sandbox jobs), ``search``
(a survivor's search and its rounds), ``budget`` (its time and spend), ``stage`` (the
stage that runs them). Its sandbox side is ``harness/probe`` (capture and compare).

1. capture: one sandbox job runs the own check with the kernel module's public
   functions wrapped (``harness/probe``'s ``capture``): which function, what arguments.
2. search: per survivor, candidates near those calls (``kinds``, ``inputs``) planned up
   to ``--probes``, run in rounds (``harness/probe``'s ``compare``): ``FIRST_BATCH`` inputs
   first (most kills are there), then up to ``BATCH`` (the rest of the budget). The
   original's run on a candidate does not depend on the survivor: it runs once per
   candidate (keyed by the candidate's request), in jobs of its own, and its digest
   is shipped to the mutants' jobs, where a mutant bit-identical to it needs no
   original run (otherwise the original runs beside it and the two are compared with
   tolerance, as before). A candidate the original rejects, or on which it varies
   between runs, is run by no survivor. Several survivors share a compare job (each
   mutant under its own module name; ``search.into_jobs`` keeps at least as many jobs as
   workers), and each stops at its first hit; a job that hangs or crashes names the
   guilty side in its output tail (``search.failed_job``): the others run again. Between
   rounds the kinds that killed in this run move to the front of every survivor's
   remaining candidates. A difference beyond the dtype's tolerance, an exception only
   the mutant raises, or a bounds violation is a hit; the original's outputs on that
   input come back as golden values. What it cost is the run's
   ``writers.probe.spend``.
3. prove: the hit becomes an ordinary pytest file (+ a golden JSON file) that must
   pass the original and fail the mutant in the sandbox, like any killer test (one
   seed: the test seeds its own inputs, and the search already ran the original on
   them twice, alike), in a warm runner (the test is the tool's, from a template:
   ``kernel_file.TRUSTED_ORIGINS``); then it runs against the other survivors too.
4. time: the search spends at most ``--probe-time`` seconds of jobs, by default
   ``BUDGET_PART`` of what the mutants' jobs took (``budget.time_budget``): every survivor's
   first round runs, then each round is cut to each survivor's share of what is left
   (``search.fit``).
A survivor the probe cannot separate keeps its verdict, and its ``probe`` row says
"not distinguished by N probes (kinds ...)": not found is not equivalent, and the
probe claims nothing (only the claims check, on the evidence it names, may call a
mutant equivalent; it reads this row as one part of that evidence). A survivor that
differs on some probe but yields no test (no differing input small enough to keep
its expected values, or no written test that passed the proof) keeps its verdict
too, and the note says that it differs: no equivalence claim then.

The package itself imports nothing: ``--probe-triggers`` reads ``kinds`` and the model's
prompts ``text`` without loading the stage (``stage``: what a run with survivors needs).
"""
