"""The maintenance pass (EXT-14, EXT-16, MEM-16): per store on a schedule, contested marking, maintenance lessons
and the promotion analyses (backend/domains/proposals), in short transactions with every helper-model call made
while none is open. `pass_.py` runs it; the job is backend/jobs/maintenance.py."""
