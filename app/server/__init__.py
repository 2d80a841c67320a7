"""The serving runtime: how the HTTP service runs, below the command line and above the API.

:mod:`~app.server.onewrite` (uvicorn's protocol writing each response in one
call), :mod:`~app.server.reuseport` (several worker processes, each on its
own ``SO_REUSEPORT`` socket), :mod:`~app.server.options` (how uvicorn runs),
:mod:`~app.server.fastpath` (single predicts and dense ranks answered before the app's
layers) and :mod:`~app.server.datadir` (the data directory: embedded Redis,
admin token).  The sub-commands of :mod:`app.commands` parse their flags and
call into it; nothing here imports :mod:`app.commands`.
"""
