"""SGLang's launch resolution without a GPU: the defaults it picks (``defaults``) and their
application to a case (``apply``)."""
