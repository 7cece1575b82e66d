"""Per-tensor compression plans: the file format (:mod:`kfsim.plans.file`), the
compression error of candidates on real gradients (:mod:`kfsim.plans.errors`)
and the choice under an error budget (:mod:`kfsim.plans.choose`)."""
