"""check_spec's static rules, one module per concern: ``common`` (every template), then the
rules of one template each (``ahe``, ``continual_harness``, ``evo_harness``), over the
read-only adapter view of ``view``. ``check_spec`` combines them into the one rule table.
"""
