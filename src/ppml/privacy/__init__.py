"""Privacy mechanisms, their immutable events, and accountants (papers' bounds and tight bounds)."""
