"""Background jobs on the PostgreSQL job queue (procrastinate): the App, the worker and thin task definitions.

Domains queue jobs in their own transaction (`backend.db.job_queue.defer`, by task name); the tasks here build
a system context per transaction (`backend.contexts.for_system`) and call the domains' services.
"""
