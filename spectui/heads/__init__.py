"""Drafting heads trained on the target's own features: Medusa and EAGLE.

medusa and eagle hold the modules and their losses, train the self-distillation loop,
store the files a trained head lives in and the check that it belongs to the target.
"""
