"""What a role is: prompt, output format, parser and reward shaping (see DESIGN.md, Roles)."""
