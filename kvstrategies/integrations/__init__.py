"""Optional bridges to serving engines (the core package never imports them)."""
