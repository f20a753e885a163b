"""The journal's data: the record envelope, one definition per event type, timestamps; the one error base and the settings' value parsers."""
