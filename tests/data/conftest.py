"""The fixture projects here are projects of their own (their tests, their conftests):
the project's suite never collects them; tests copy them and run them under the tool."""

collect_ignore = ["generated_lib", "writable_lib"]
