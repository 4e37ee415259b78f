"""`spectui advise`'s library: the user's saved replies replayed for every copy drafter and k at
T = 0 (exact: a copied draft is kept while it equals the reply), charged at a cost profile
measured on this machine (or another's). The entry point is spectui.advise.advice.advise."""
