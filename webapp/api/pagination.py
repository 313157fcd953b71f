from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    """?page=N (50 rows a page by default), ?page_size= up to 500."""

    page_size_query_param = "page_size"
    max_page_size = 500


class MeasurementPagination(Pagination):
    """Measurements carry up to 10,000 samples each: fewer a page."""

    page_size = 20
    max_page_size = 100
