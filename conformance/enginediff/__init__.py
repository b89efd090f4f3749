"""`conformance engines-diff`: the same flow scenarios, with the reference worker, on the reference
engine and on real engines (daprd, durabletask-go), compared instance by instance after removing
only what the contract leaves free (`normalise`)."""
