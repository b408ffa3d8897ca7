"""Jupyter server settings of the rcteach venv (copied into it by `make setup`).

JupyterLab writes the running kernel's ``language_info`` into a notebook's metadata when the kernel
starts.  A chapter (``book/*.md``, read by jupytext) carries no ``language_info`` (jupytext drops
it on save, see ``book/jupytext.toml``), so that write alone would mark every chapter modified as
soon as it is opened, and closing it untouched would ask to save.  The contents manager below is
jupytext's, except that a text notebook for the ``python3`` kernel is served with the
``language_info`` that kernel reports (ipykernel's, from this same venv; the book's ``.ipynb``
downloads carry the same, rcteach.tools.notebooks.kernel_language_info): the kernel's write then
changes nothing.
"""

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from jupytext.async_contentsmanager import build_async_jupytext_contents_manager_class

from rcteach.tools.notebooks import add_language_info


class ChapterContentsManager(build_async_jupytext_contents_manager_class(AsyncLargeFileManager)):
    """Jupytext's contents manager; text notebooks come with their kernel's ``language_info``."""

    async def get(self, path, content=True, type=None, format=None, **kwargs):
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if content and model["type"] == "notebook" and not path.endswith(".ipynb"):
            add_language_info(model["content"]["metadata"])
        return model


c.ServerApp.contents_manager_class = ChapterContentsManager  # noqa: F821 (the config object)
